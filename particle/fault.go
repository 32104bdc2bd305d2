package particle

import "fmt"

// InjectFault makes every later commit fail with err, wrapped in
// ErrStorage, as a full or failing disk would; nil clears the fault.
// Nothing of a failed batch is written. It is for tests and drills of
// what the daemon does when storage fails.
func (s *Store) InjectFault(err error) {
	if err == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&err)
}

func (s *Store) injectedFault() error {
	if p := s.fault.Load(); p != nil {
		return fmt.Errorf("%w: commit: %w", ErrStorage, *p)
	}
	return nil
}
