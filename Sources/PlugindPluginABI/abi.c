/* The plugin ABI is header-only; this file exists so SwiftPM builds the target. */
