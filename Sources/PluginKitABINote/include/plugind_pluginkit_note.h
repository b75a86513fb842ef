/* PluginKitABINote has no interface: linking it records the ABI note. */
