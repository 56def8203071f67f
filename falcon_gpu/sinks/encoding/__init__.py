"""Wire encodings shared by more than one sink (pure functions of their input)."""
