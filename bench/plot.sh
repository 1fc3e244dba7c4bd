#!/usr/bin/env bash
# Plots of a rootspec-bench run ([TPR] App. D.14 protocol) with gnuplot:
#   tokens_per_s.png        tokens/s per decoder and budget, 95% paired-bootstrap interval bars,
#                           one panel per temperature, plain autoregressive speed as a dashed line
#   gain_over_baseline.png  gain (%) of each decoder over the baseline decoder (default draft)
#                           at the same T and B, with its interval bars
#   accepted_hist.png       accepted-length histogram (share of rounds that accepted k draft
#                           tokens) per decoder, one panel per (T, B), from the CSV's accepted_hist
# Usage: bench/plot.sh SUMMARY.json RECORDS.csv [OUT_DIR]   (OUT_DIR defaults to the JSON's folder)
# Needs gnuplot (Debian: gnuplot-nox), jq and awk.
set -euo pipefail

usage() { echo "usage: $0 SUMMARY.json RECORDS.csv [OUT_DIR]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
summary=$1
csv=$2
out=${3:-$(dirname "$summary")}
[ -r "$summary" ] || { echo "plot.sh: cannot read $summary" >&2; exit 2; }
[ -r "$csv" ] || { echo "plot.sh: cannot read $csv" >&2; exit 2; }
for tool in gnuplot jq awk; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    case $tool in
      gnuplot) echo "plot.sh: gnuplot is missing: install it (Debian: apt-get install gnuplot-nox) and rerun" >&2 ;;
      jq) echo "plot.sh: jq is missing: install it (Debian: apt-get install jq) and rerun" >&2 ;;
      *) echo "plot.sh: $tool is missing" >&2 ;;
    esac
    exit 3
  fi
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

baseline=$(jq -r '.baseline' "$summary")
ar=$(jq -r '.ar' "$summary")
level=$(jq -r '.bootstrap.level * 100 | floor' "$summary")
resamples=$(jq -r '.bootstrap.resamples' "$summary")
# Tree decoders in first-seen order; temperatures and budgets sorted.
decoders=$(jq -c --arg ar "$ar" '[.entries[] | select(.decoder != $ar) | .decoder]
  | reduce .[] as $d ([]; if index([$d]) then . else . + [$d] end)' "$summary")
temps=$(jq -r '[.entries[].temperature] | unique | .[]' "$summary")
n_temps=$(echo "$temps" | wc -l)
budgets=$(jq -c '[.entries[] | select(.budget > 0) | .budget] | unique' "$summary")
n_budgets=$(jq -r 'length' <<<"$budgets")
[ "$n_budgets" -gt 0 ] || { echo "plot.sh: no tree decoder entries in $summary" >&2; exit 1; }

# One table per temperature: budget, then value lo hi for each decoder ("?" where absent).
# $1 = jq path of the estimate (e.g. .tokens_per_s), $2 = scale, $3 = decoders to list.
table() {
  jq -r --argjson t "$t" --argjson decs "$3" --argjson budgets "$budgets" --argjson k "$2" '
    . as $s | $budgets[] as $b |
    [$b] + ($decs | map(. as $d |
      (first($s.entries[] | select(.decoder == $d and .temperature == $t and .budget == $b)
         | '"$1"' | select(. != null) | [.value * $k, .lo * $k, .hi * $k]) // ["?", "?", "?"]))
      | add) | @tsv' "$summary"
}

# Line type (colour) of the d-th decoder of list $2: its position in the full list, so a
# decoder keeps its colour in every plot.
colour() { jq -r --argjson all "$decoders" --argjson d "$1" '.[$d] as $x | ($all | index([$x])) + 1' <<<"$2"; }

gain_decoders=$(jq -c --arg b "$baseline" 'map(select(. != $b))' <<<"$decoders")
# gnuplot's command for one interval-bar series per decoder of $2 from the table $1 (table()).
bar_plot() {
  local plot d n
  n=$(jq -r 'length' <<<"$2")
  plot="plot '$1' using 2:3:4:xtic(1) lt $(colour 0 "$2") title $(jq -r '.[0] | @json' <<<"$2")"
  for ((d = 1; d < n; d++)); do
    plot+=", '' using $((2 + 3 * d)):$((3 + 3 * d)):$((4 + 3 * d)) lt $(colour $d "$2") title $(jq -r ".[$d] | @json" <<<"$2")"
  done
  printf '%s' "$plot"
}
n_dec=$(jq -r 'length' <<<"$decoders")
n_gain=$(jq -r 'length' <<<"$gain_decoders")

common='set terminal pngcairo size %d,%d font "sans,10"
set datafile separator "\t"
set datafile missing "?"
set style data histograms
set style histogram errorbars gap 2 lw 1.2
set style fill solid 0.75 border -1
set boxwidth 0.9
set grid ytics
set key outside below center horizontal
set offsets 0, 0, graph 0.06, 0
set xlabel "tree budget B"
'

# ---- tokens/s --------------------------------------------------------------------------------
{
  printf "$common" $((520 * n_temps)) 470
  echo "set output '$out/tokens_per_s.png'"
  echo "set multiplot layout 1,$n_temps title 'tokens/s per decoder ($level% paired bootstrap intervals, $resamples resamples)'"
  i=0
  for t in $temps; do
    table .tokens_per_s 1 "$decoders" > "$work/speed_$i.tsv"
    arv=$(jq -r --arg ar "$ar" --argjson t "$t" \
      'first(.entries[] | select(.decoder == $ar and .temperature == $t) | .tokens_per_s.value) // empty' "$summary")
    echo "set title 'T = $t'"
    echo "set ylabel 'tokens/s'"
    echo "set yrange [0:*]"
    echo "set xrange [-0.5:$n_budgets - 0.5]"
    plot=$(bar_plot "$work/speed_$i.tsv" "$decoders")
    if [ -n "$arv" ]; then
      plot+=", $arv with lines dt 2 lw 2 lc rgb 'black' title sprintf('$ar %.1f', $arv)"
    fi
    echo "$plot"
    i=$((i + 1))
  done
  echo "unset multiplot"
} > "$work/speed.gp"
gnuplot "$work/speed.gp"

# ---- gain over the baseline -------------------------------------------------------------------
if [ "$n_gain" -gt 0 ]; then
  {
    printf "$common" $((520 * n_temps)) 470
    echo "set output '$out/gain_over_baseline.png'"
    echo "set multiplot layout 1,$n_temps title 'gain over $baseline (%, $level% paired bootstrap intervals over prompts)'"
    i=0
    for t in $temps; do
      table .gain_over_baseline 100 "$gain_decoders" > "$work/gain_$i.tsv"
      echo "set title 'T = $t'"
      echo "set ylabel 'speed_{decoder} / speed_{$baseline} - 1  (%)'"
      echo "set yrange [*:*]"
      echo "set xrange [-0.5:$n_budgets - 0.5]"
      plot=$(bar_plot "$work/gain_$i.tsv" "$gain_decoders")
      plot+=", 0 with lines lc rgb 'black' notitle"
      echo "$plot"
      i=$((i + 1))
    done
    echo "unset multiplot"
  } > "$work/gain.gp"
  gnuplot "$work/gain.gp"
fi

# ---- accepted-length histogram (from the CSV) -------------------------------------------------
# RFC 4180 fields (quoted fields may hold commas, doubled quotes and line breaks), portable awk.
# Writes hist.tsv: T, B, decoder, k, rounds — summed over the non-warm-up decodes.
awk -v ar="$ar" '
function parse(rec,    i, c, n, q, f) {
  n = 0; f = ""; q = 0
  for (i = 1; i <= length(rec); i++) {
    c = substr(rec, i, 1)
    if (q) {
      if (c == "\"") { if (substr(rec, i + 1, 1) == "\"") { f = f c; i++ } else q = 0 }
      else f = f c
    } else if (c == "\"") q = 1
    else if (c == ",") { F[++n] = f; f = "" }
    else if (c != "\r") f = f c
  }
  F[++n] = f
  return n
}
{
  rec = (pending == "" ? $0 : pending "\n" $0)
  # An odd number of quotes so far: the record goes on past this line break.
  if (gsub(/"/, "\"", rec) % 2 == 1) { pending = rec; next }
  pending = ""
  n = parse(rec)
  if (!header) {
    for (i = 1; i <= n; i++) col[F[i]] = i
    if (!("accepted_hist" in col) || !("decoder" in col)) { print "plot.sh: CSV lacks accepted_hist" > "/dev/stderr"; exit 1 }
    header = 1; next
  }
  if (F[col["warmup"]] == "1" || F[col["decoder"]] == ar) next
  m = split(F[col["accepted_hist"]], h, " ")
  for (k = 1; k <= m; k++) sum[F[col["temperature"]] "\t" F[col["budget"]] "\t" F[col["decoder"]] "\t" (k - 1)] += h[k]
}
END { for (key in sum) print key "\t" sum[key] }' "$csv" > "$work/hist.tsv"

if [ -s "$work/hist.tsv" ]; then
  hist_temps=$(cut -f1 "$work/hist.tsv" | sort -g -u)
  hist_budgets=$(cut -f2 "$work/hist.tsv" | sort -g -u)
  n_ht=$(echo "$hist_temps" | wc -l)
  n_hb=$(echo "$hist_budgets" | wc -l)
  hist_decs=$(jq -r '.[]' <<<"$decoders")
  {
    printf "$common" $((560 * n_hb)) $((400 * n_ht))
    echo "set style histogram clustered gap 1"
    echo "set xlabel 'accepted draft tokens per round'"
    echo "set ylabel 'share of rounds'"
    echo "set output '$out/accepted_hist.png'"
    echo "set multiplot layout $n_ht,$n_hb title 'accepted-length histogram per decoder'"
    i=0
    for t in $hist_temps; do
      for b in $hist_budgets; do
        # Rows k = 0..max, one column per decoder: the share of that decoder's rounds.
        awk -F'\t' -v t="$t" -v b="$b" -v decs="$(echo $hist_decs)" '
          BEGIN { nd = split(decs, D, " ") }
          $1 == t && $2 == b { c[$3, $4] = $5; tot[$3] += $5; if ($4 + 0 > kmax) kmax = $4 + 0 }
          END {
            for (k = 0; k <= kmax; k++) {
              line = k
              for (d = 1; d <= nd; d++)
                line = line "\t" ((D[d] in tot) && tot[D[d]] > 0 ? c[D[d], k] / tot[D[d]] : "?")
              print line
            }
          }' "$work/hist.tsv" > "$work/hist_$i.tsv"
        echo "set title 'T = $t, B = $b'"
        echo "set yrange [0:*]"
        plot="plot '$work/hist_$i.tsv' using 2:xtic(1) lt $(colour 0 "$decoders") title $(jq -r '.[0] | @json' <<<"$decoders")"
        for ((d = 1; d < n_dec; d++)); do
          plot+=", '' using $((2 + d)) lt $(colour $d "$decoders") title $(jq -r ".[$d] | @json" <<<"$decoders")"
        done
        echo "$plot"
        i=$((i + 1))
      done
    done
    echo "unset multiplot"
  } > "$work/hist.gp"
  gnuplot "$work/hist.gp"
else
  echo "plot.sh: no accepted_hist counts in $csv; skipping accepted_hist.png" >&2
fi

ls "$out"/tokens_per_s.png "$out"/gain_over_baseline.png "$out"/accepted_hist.png 2>/dev/null
