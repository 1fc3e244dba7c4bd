// A straight line y = a + b·x fitted by least squares to measurements that age: each new point
// weighs `weight` of the sum and the old ones keep (1 − weight) of theirs, so the line follows a
// machine whose speed drifts. The policy's pass costs are all such lines (decoding_policy.h).
#pragma once

namespace rootspec {

class ForgettingLine {
 public:
  explicit ForgettingLine(double weight = 0.03) : weight_(weight) {}

  // One measurement. Once the line stands, a point above kStall times the line is cut to it: one
  // stall of the machine (a page fault, another process) would otherwise tilt the line for
  // dozens of rounds.
  void add(double x, double y);
  bool measured() const { return n_ > 0; }
  int points() const { return n_; }
  // The fitted value at x (0 before any point); with every point at one x so far, their mean.
  double at(double x) const;
  double slope() const;  // 0 while the points span no range of x
  bool spans() const;    // the points span a range of x (the slope is measured)

  static constexpr double kStall = 3.0;

 private:
  double weight_;
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sxy_ = 0;  // weighted sums of 1, x, x², y, x·y
  int n_ = 0;
};

}  // namespace rootspec
