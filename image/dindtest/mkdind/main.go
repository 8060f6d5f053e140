// Command mkdind builds the dind test image (package dindtest) and puts a
// copy of its OCI layout in DIR (dindtest.CopyLayout: the read-only blobs
// hard-linked from the cache when possible, index.json and oci-layout
// copied, so editing DIR never changes the cache), with -hello a
// docker-archive of the hello image, and with -tagged TAG=TAR a docker-archive of a second image (busybox plus
// /etc/gvx-image) tagged TAG.
//
//	go run ./image/dindtest/mkdind [-flavour bookworm|sid] [-hello hello.tar] [-tagged tools:1=tools.tar] DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"z.gfire.dev/gvx/image/dindtest"
)

func main() {
	flavourName := flag.String("flavour", dindtest.Bookworm.Name, "the daemon's `FLAVOUR`: "+flavourNames())
	hello := flag.String("hello", "", "also write the hello image as a docker-archive `TAR`")
	var tagged []string
	flag.Func("tagged", "also write busybox plus /etc/gvx-image as a docker-archive: `TAG=TAR` (repeatable)", func(v string) error {
		if tag, tarPath, ok := strings.Cut(v, "="); !ok || tag == "" || tarPath == "" {
			return fmt.Errorf("want TAG=TAR, got %q", v)
		}
		tagged = append(tagged, v)
		return nil
	})
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mkdind [-flavour NAME] [-hello TAR] [-tagged TAG=TAR]... DIR\n(cache: $%s, default %s)\n", dindtest.CacheEnv, dindtest.DefaultCacheDir())
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	flavour, ok := dindtest.FlavourNamed(*flavourName)
	if !ok {
		fmt.Fprintf(os.Stderr, "mkdind: no flavour %q (want %s)\n", *flavourName, flavourNames())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	src, err := flavour.Build(ctx, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdind:", err)
		os.Exit(1)
	}
	if err := dindtest.CopyLayout(src, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "mkdind:", err)
		os.Exit(1)
	}
	if *hello != "" {
		if err := dindtest.WriteHello(*hello); err != nil {
			fmt.Fprintln(os.Stderr, "mkdind:", err)
			os.Exit(1)
		}
	}
	for _, v := range tagged {
		tag, tarPath, _ := strings.Cut(v, "=")
		if err := dindtest.WriteTagged(tarPath, tag); err != nil {
			fmt.Fprintln(os.Stderr, "mkdind:", err)
			os.Exit(1)
		}
	}
	fmt.Println("oci:" + flag.Arg(0))
}

func flavourNames() string {
	var names []string
	for _, f := range dindtest.Flavours {
		names = append(names, f.Name)
	}
	return strings.Join(names, " or ")
}
