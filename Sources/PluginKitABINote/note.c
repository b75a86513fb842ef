/* Records the plugin ABI note (see plugind_plugin.h) in every Swift plugin built with PluginKit,
 * where `plugind verify` reads it without running the plugin. */
#include "plugind_plugin.h"
