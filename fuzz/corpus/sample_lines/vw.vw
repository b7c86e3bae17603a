A
1 2.0 'a17|user age:0.3 tall |ad id_93
-1 |ns:0.5 f:2 g
0 0 |x a
