module weft.bench/core

go 1.19
