module weft.bench/sync

go 1.19
