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

// Advise does nothing off Linux.
func (k *Keeper) Advise() error { return nil }

// Collapse does nothing off Linux.
func (k *Keeper) Collapse(ctx context.Context) error { return nil }
