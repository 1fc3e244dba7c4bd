#include "utf8_nfc.h"

#include "utf8.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rootspec {
namespace {

#include "utf8_nfc_tables.inc"

// Hangul syllables compose and decompose arithmetically (Unicode §3.12), not through tables.
constexpr uint32_t S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7;
constexpr uint32_t L_COUNT = 19, V_COUNT = 21, T_COUNT = 28;
constexpr uint32_t N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT;

template <size_t W, size_t N>
const uint32_t* find_row(const uint32_t (&table)[N][W], uint32_t cp) {
  const auto* end = table + N;
  const auto* it =
      std::lower_bound(table, end, cp, [](const uint32_t(&row)[W], uint32_t v) { return row[0] < v; });
  return (it != end && (*it)[0] == cp) ? *it : nullptr;
}

uint8_t ccc(uint32_t cp) {
  if (cp < 0x300) return 0;
  const uint32_t* row = find_row(k_nfc_ccc, cp);
  return row ? static_cast<uint8_t>(row[1]) : 0;
}

bool unsafe(uint32_t cp) {
  const auto* end = k_nfc_unsafe + sizeof(k_nfc_unsafe) / sizeof(k_nfc_unsafe[0]);
  const auto* it =
      std::upper_bound(k_nfc_unsafe, end, cp, [](uint32_t v, const uint32_t(&r)[2]) { return v < r[0]; });
  if (it == k_nfc_unsafe) return false;
  --it;
  return cp >= (*it)[0] && cp <= (*it)[1];
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
    const uint32_t s = cp - S_BASE;
    out.push_back(L_BASE + s / N_COUNT);
    out.push_back(V_BASE + (s % N_COUNT) / T_COUNT);
    if (s % T_COUNT) out.push_back(T_BASE + s % T_COUNT);
    return;
  }
  const uint32_t* row = cp < 0xC0 ? nullptr : find_row(k_nfc_decomp, cp);
  if (!row) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), k_nfc_decomp_data + row[1], k_nfc_decomp_data + row[1] + row[2]);
}

// Returns 0 when the pair has no primary composite.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT) {
    return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
  }
  if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
      b < T_BASE + T_COUNT) {
    return a + (b - T_BASE);
  }
  const auto* end = k_nfc_compose + sizeof(k_nfc_compose) / sizeof(k_nfc_compose[0]);
  const auto* it = std::lower_bound(k_nfc_compose, end, std::make_pair(a, b),
                                    [](const uint32_t(&r)[3], const std::pair<uint32_t, uint32_t>& v) {
                                      return r[0] < v.first || (r[0] == v.first && r[1] < v.second);
                                    });
  return (it != end && (*it)[0] == a && (*it)[1] == b) ? (*it)[2] : 0;
}

}  // namespace

bool utf8_nfc_quick_check(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<uint8_t>(s[i]) < 0xCC) {  // below U+0300 nothing changes under NFC
      i += static_cast<uint8_t>(s[i]) < 0x80 ? 1 : 2;
      continue;
    }
    if (unsafe(utf8_next(s, i))) return false;
  }
  return true;
}

std::string utf8_nfc(std::string_view s) {
  if (utf8_nfc_quick_check(s)) return std::string(s);

  std::vector<uint32_t> d;
  d.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose(utf8_next(s, i), d);

  // Canonical ordering: stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (ccc(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && ccc(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [](uint32_t a, uint32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }

  // Canonical composition: a character joins the last starter unless something between them
  // blocks it (a starter, or a non-starter of the same or higher class).
  std::vector<uint32_t> out;
  out.reserve(d.size());
  long starter = -1;
  uint8_t last_ccc = 0;
  for (uint32_t c : d) {
    const uint8_t cc = ccc(c);
    if (starter >= 0) {
      const bool adjacent = static_cast<size_t>(starter) + 1 == out.size();
      if (adjacent || (last_ccc != 0 && last_ccc < cc)) {
        if (uint32_t comp = compose(out[starter], c)) {
          out[starter] = comp;
          continue;
        }
      }
    }
    if (cc == 0) starter = static_cast<long>(out.size());
    last_ccc = cc;
    out.push_back(c);
  }

  std::string res;
  res.reserve(s.size());
  for (uint32_t c : out) utf8_append(res, c);
  return res;
}

}  // namespace rootspec
