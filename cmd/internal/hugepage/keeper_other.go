//go:build !linux

package hugepage

import (
	"context"
	"errors"
)

// Run reports that huge pages are managed only on Linux.
func (k *Keeper) Run(ctx context.Context) error {
	return errors.New("hugepage: transparent huge pages are managed only on Linux")
}

// Pass does nothing off Linux.
func (k *Keeper) Pass(ctx context.Context) error { return nil }
