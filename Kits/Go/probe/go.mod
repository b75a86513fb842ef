module plugind/kitprobe

go 1.19

require plugind/kit v0.0.0

replace plugind/kit => ../plugind
