package estimate

// SetBodyCurve turns the body line's curvature-chosen memory on or off
// (bodyCurveOn) for a comparison, and returns the function that restores
// it. Not safe beside parallel tests of the centre line.
func SetBodyCurve(on bool) (restore func()) {
	return setSwitch(&bodyCurveOn, on)
}

// SetFloorCurve turns the floor line's curvature-chosen memory on or off
// (floorCurveOn) and returns the function that restores it. Not safe
// beside parallel tests of the centre line.
func SetFloorCurve(on bool) (restore func()) {
	return setSwitch(&floorCurveOn, on)
}

// SetBodyNoise turns the body line's noise-chosen memory stretch on or
// off (bodyNoiseOn; off: bodyMemoryScale) and returns the function that
// restores it. Not safe beside parallel tests of the centre line.
func SetBodyNoise(on bool) (restore func()) {
	return setSwitch(&bodyNoiseOn, on)
}

// SetBodyKalman turns the body's Kalman line on or off (bodyKalmanOn)
// and returns the function that restores it. Not safe beside parallel
// tests of the centre line.
func SetBodyKalman(on bool) (restore func()) {
	return setSwitch(&bodyKalmanOn, on)
}

// setSwitch sets the package switch *p to on and returns the function
// that restores it.
func setSwitch(p *bool, on bool) (restore func()) {
	was := *p
	*p = on
	return func() { *p = was }
}
