module plugind/kit

go 1.19
