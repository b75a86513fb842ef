/* Header-only: see include/faulty_plugin.h. */
