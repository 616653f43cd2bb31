module weft.bench/http

go 1.19
