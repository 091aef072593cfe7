module udsfs/unixprobe

go 1.19
