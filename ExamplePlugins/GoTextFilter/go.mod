module plugind/examples/gotextfilter

go 1.19

require plugind/kit v0.0.0

replace plugind/kit => ../../Kits/Go/plugind
