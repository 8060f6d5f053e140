package gvx

// ProcessTree is pid and every process below it (for the tests of
// gvx_test, which check what the pool did to an episode's processes).
var ProcessTree = descendants
