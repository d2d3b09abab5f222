package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/txkernel/txkernel/tx"
)

// prune is `txkernel prune --data-dir D --older-than DURATION`: it removes
// terminal transactions whose last state change is older than DURATION (a
// Go duration such as 720h), printing each id it removed. Exit status: 0
// on success, 1 when a kernel holds the data dir or an I/O error stops it,
// 2 on a usage error.
func prune(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "the kernel's data directory (required)")
	olderThan := fs.Duration("older-than", -1, "remove terminal transactions whose state is older than this (required), e.g. 720h")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *olderThan < 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: txkernel prune --data-dir DIR --older-than DURATION")
		return 2
	}
	res, err := tx.Prune(context.Background(), *dataDir, time.Now().Add(-*olderThan))
	if res != nil {
		for _, id := range res.Removed {
			fmt.Fprintln(stdout, "removed", id)
		}
	}
	if err != nil {
		if errors.Is(err, tx.ErrDataDirLocked) {
			fmt.Fprintf(stderr, "txkernel prune: %v; stop that kernel first\n", err)
		} else {
			fmt.Fprintf(stderr, "txkernel prune: %v\n", err)
		}
		return 1
	}
	fmt.Fprintf(stdout, "pruned %d terminal transaction(s); kept %d not terminal and %d newer than %s\n",
		len(res.Removed), res.KeptLive, res.KeptYoung, *olderThan)
	return 0
}
