package main

// The extension point this code serves, recorded in the library: `plugind verify` checks that
// the manifest names the same one.

/*
#cgo CFLAGS: -I${SRCDIR}/../../Kits/Go/plugind/include
#include <plugind_plugin.h>
PLUGIND_PLUGIN_BINDING("org.plugind.examples.text-filters");
*/
import "C"
