package enum TestSupportPlaceholder {}
