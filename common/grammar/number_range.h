// JSON numbers within bounds, as grammar expressions: the exact languages behind JSON Schema's
// minimum, maximum, exclusiveMinimum and exclusiveMaximum (json_schema.cpp). Bounds are decimals
// taken from the schema's text, compared exactly (no floating point), so that zod's ±(2^53 − 1),
// a bound of 0.1 and a bound of 1e-9 all mean what they say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rootspec::grammar {

// A decimal number, exactly: its sign, the digits of its integer part without leading zeros
// ("0" for none) and the digits after the point without trailing zeros. Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string whole = "0";
  std::string fraction;

  // The value of a JSON number's text ("-12.50e3" is -12500); nullopt if the text is not a JSON
  // number or its value needs more than `max_digits` digits written out.
  static std::optional<Decimal> parse(const std::string& json_number, int max_digits);
  bool is_integer() const { return fraction.empty(); }
  bool is_zero() const { return whole == "0" && fraction.empty(); }
  Decimal negated() const;
};

// −1, 0 or 1 as a < b, a = b, a > b.
int compare(const Decimal& a, const Decimal& b);

struct NumberBound {
  Decimal value;
  bool exclusive = false;  // the bound itself is not in the range
};

// GBNF expression (no rule names) for the JSON number texts whose value x satisfies
// lower ≤ x ≤ upper (< where a bound is exclusive; an absent bound does not constrain), written
// "-"? integer ("." digits)? with the integer part without leading zeros — integers only when
// `integers_only` —, never with an exponent and never as negative zero ("-0", "-0.5" is fine).
// nullopt when no number is in the range.
std::optional<std::string> bounded_number(const std::optional<NumberBound>& lower,
                                          const std::optional<NumberBound>& upper, bool integers_only);

// Where a grammar's rules are written: multiples need named and recursive rules. reserve names a
// rule whose body define sets later (a rule may refer to itself); add writes a rule (the same
// body may come back under an earlier name).
class RuleSink {
 public:
  virtual ~RuleSink() = default;
  virtual std::string reserve(const std::string& hint) = 0;
  virtual void define(const std::string& name, const std::string& body) = 0;
  virtual std::string add(const std::string& hint, const std::string& body) = 0;
};

// GBNF expression for the integers x with lower ≤ x ≤ upper (as bounded_number; an absent bound
// does not constrain) that are multiples of `divisor` ≥ 1 (JSON Schema's multipleOf), written as
// bounded_number writes integers, by a residue automaton over the digits: a digit d takes residue
// r to (10 r + d) mod divisor, and a text ends at residue 0. Its rules go to `rules`; nullopt when
// no such integer is in range. Throws std::length_error where the automaton would need more than
// `max_states` (digits × residues) rules.
std::optional<std::string> bounded_multiple(const std::optional<NumberBound>& lower,
                                            const std::optional<NumberBound>& upper, uint64_t divisor,
                                            RuleSink& rules, size_t max_states);

// Whether x is an integer multiple of m > 0, decided exactly; nullopt where m written without its
// point (m·10^f, f the fraction digits of x and m) passes 18 digits.
std::optional<bool> is_multiple(const Decimal& x, const Decimal& m);

}  // namespace rootspec::grammar
