/* Header-only: declares libFuzzer's driver entry. */
