module weft.bench/io

go 1.19
