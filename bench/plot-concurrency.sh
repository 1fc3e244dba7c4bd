#!/usr/bin/env bash
# Plot of a rootspec-bench --concurrency run: throughput_vs_concurrency.png, aggregate tokens/s
# against the number of closed-loop clients (log2 axis), one line per decoder (and budget), one
# panel per temperature; and tpot_vs_concurrency.png, the per-request p50 time per output token.
# Usage: bench/plot-concurrency.sh CONCURRENCY.csv [OUT_DIR]   (OUT_DIR defaults to the CSV's folder)
# Needs gnuplot (Debian: gnuplot-nox) and awk.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 CONCURRENCY.csv [OUT_DIR]" >&2; exit 2; }
csv=$1
out=${2:-$(dirname "$csv")}
[ -r "$csv" ] || { echo "plot-concurrency.sh: cannot read $csv" >&2; exit 2; }
command -v gnuplot >/dev/null 2>&1 || {
  echo "plot-concurrency.sh: gnuplot is missing: install it (Debian: apt-get install gnuplot-nox) and rerun" >&2
  exit 3
}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One data file per (temperature, decoder B): concurrency, aggregate tokens/s, TPOT p50.
awk -F, -v dir="$work" 'NR > 1 {
  series = $2 ($4 > 0 ? " B=" $4 : "")
  key = $3 SUBSEP series
  if (!(key in files)) { files[key] = dir "/T" $3 "__" length(files); print $3 "\t" series "\t" files[key] > dir "/index" }
  print $1 "\t" $7 "\t" $11 > files[key]
}' "$csv"
[ -s "$work/index" ] || { echo "plot-concurrency.sh: no rows in $csv" >&2; exit 1; }
temps=$(cut -f1 "$work/index" | sort -gu)
n_temps=$(echo "$temps" | wc -l)

plot_panels() {  # $1 = column (2: tokens/s, 3: TPOT), $2 = y label, $3 = output file, $4 = title
  {
    printf 'set terminal pngcairo size %d,420 font "sans,10"\n' $((520 * n_temps))
    printf 'set output "%s"\nset multiplot layout 1,%d title "%s"\n' "$3" "$n_temps" "$4"
    printf 'set logscale x 2\nset grid\nset key bottom right\nset yrange [0:*]\nset xlabel "concurrent requests"\nset ylabel "%s"\n' "$2"
    for t in $temps; do
      printf 'set title "T = %s"\n' "$t"
      plot="plot"
      sep=" "
      while IFS=$'\t' read -r tt series file; do
        [ "$tt" = "$t" ] || continue
        plot+="$sep'$file' using 1:$1 with linespoints lw 2 title \"$series\""
        sep=", "
      done <"$work/index"
      echo "$plot"
    done
    echo "unset multiplot"
  } >"$work/plot.gp"
  gnuplot "$work/plot.gp"
}
plot_panels 2 "aggregate tokens/s" "$out/throughput_vs_concurrency.png" "Throughput against concurrency ($(basename "$(dirname "$csv")"))"
plot_panels 3 "p50 time per output token (ms)" "$out/tpot_vs_concurrency.png" "Per-request time per output token"
echo "plots: $out/throughput_vs_concurrency.png $out/tpot_vs_concurrency.png"
