//go:build !darwin && !linux

package tart

import (
	"errors"
	"os"
)

// tryFlock: Tart runs on macOS only, and the tests on Linux.
func tryFlock(*os.File) (bool, error) { return false, errors.ErrUnsupported }
