// The source of towerps_test_pch (tests/CMakeLists.txt): the target exists to compile GoogleTest's
// precompiled header once, for every suite to reuse; it has no code of its own.
