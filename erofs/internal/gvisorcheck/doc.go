// Package gvisorcheck holds only a test: gVisor's own EROFS reader (the
// Sentry's) walking a runtime-profile image. It lives apart from package
// erofs so erofs's fuzz targets are not instrumented over gVisor's large
// dependency tree, which made them crawl.
package gvisorcheck
