set terminal pngcairo size 720,480 font "sans,10"
set logscale x 2
set key left top
set xlabel "budget B (nodes)"
set ylabel "V(T): expected accepted draft tokens"
set grid
set output "v_vs_budget_T0.png"
set title "V against B per rule, T = 0"
plot "v_vs_budget.dat" index 0 using 1:2 with linespoints title "draft", "v_vs_budget.dat" index 0 using 1:3 with linespoints title "root", "v_vs_budget.dat" index 0 using 1:4 with linespoints title "root-draw", "v_vs_budget.dat" index 0 using 1:5 with linespoints title "pearl", "v_vs_budget.dat" index 0 using 1:6 with linespoints title "depth-two", "v_vs_budget.dat" index 0 using 1:7 with linespoints title "oracle"
set output "v_vs_budget_T1.png"
set title "V against B per rule, T = 1"
plot "v_vs_budget.dat" index 1 using 1:2 with linespoints title "draft", "v_vs_budget.dat" index 1 using 1:3 with linespoints title "root", "v_vs_budget.dat" index 1 using 1:4 with linespoints title "root-draw", "v_vs_budget.dat" index 1 using 1:5 with linespoints title "pearl", "v_vs_budget.dat" index 1 using 1:6 with linespoints title "depth-two", "v_vs_budget.dat" index 1 using 1:7 with linespoints title "oracle"
