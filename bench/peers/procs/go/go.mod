module weft.bench/procs

go 1.19
