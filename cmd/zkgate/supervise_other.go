//go:build !unix

package main

import (
	"context"
	"errors"
	"io"
)

// lock and elect run CMD in a process group of its own and pass signals
// on: Unix only.
func lockCommand(context.Context, []string, func(string) string, io.Writer, io.Writer) error {
	return errors.New("zkgate lock needs a Unix system")
}

func electCommand(context.Context, []string, func(string) string, io.Writer, io.Writer) error {
	return errors.New("zkgate elect needs a Unix system")
}
