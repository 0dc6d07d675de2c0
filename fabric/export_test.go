package fabric

// SetPieceSize makes every domain of e post writes in pieces of piece
// bytes and treat writes as ordered or not, as a provider reporting that
// MaxWrite and OrderedWrites would: tests drive the splitting with small
// writes.
func SetPieceSize(e *Engine, piece uint64, ordered bool) error {
	for _, w := range e.workers {
		if err := e.control(w, func(w *worker) {
			for _, ds := range w.doms {
				ds.piece = piece
				ds.info.OrderedWrites = ordered
			}
		}); err != nil {
			return err
		}
	}
	return nil
}
