package config

// Number is the kind of a numeric setting (time.Duration included).
type Number interface {
	~int | ~int64 | ~float64
}

// OrDefault is v, or def when v is zero or negative: a setting whose zero
// (or nonsense) takes the default and that cannot be turned off.
func OrDefault[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// OrOff is v, def when v is zero, and 0 ("off", as its reader takes it)
// when v is negative: a setting whose zero takes the default and whose
// negative value (the packages' Off) turns it off.
func OrOff[T Number](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
