module udsfs/passfd

go 1.19
