package estimate

// SetBodyCurve turns the body line's curvature-chosen memory on or off
// (bodyCurveOn) for a comparison, and returns the function that restores
// it. Not safe beside parallel tests of the centre line.
func SetBodyCurve(on bool) (restore func()) {
	was := bodyCurveOn
	bodyCurveOn = on
	return func() { bodyCurveOn = was }
}

// SetFloorCurve turns the floor line's curvature-chosen memory on or off
// (floorCurveOn) and returns the function that restores it. Not safe
// beside parallel tests of the centre line.
func SetFloorCurve(on bool) (restore func()) {
	was := floorCurveOn
	floorCurveOn = on
	return func() { floorCurveOn = was }
}

// SetBodyNoise turns the body line's noise-chosen memory stretch on or
// off (bodyNoiseOn; off: bodyMemoryScale) and returns the function that
// restores it. Not safe beside parallel tests of the centre line.
func SetBodyNoise(on bool) (restore func()) {
	was := bodyNoiseOn
	bodyNoiseOn = on
	return func() { bodyNoiseOn = was }
}

// SetBodyKalman turns the body's Kalman line on or off (bodyKalmanOn)
// and returns the function that restores it. Not safe beside parallel
// tests of the centre line.
func SetBodyKalman(on bool) (restore func()) {
	was := bodyKalmanOn
	bodyKalmanOn = on
	return func() { bodyKalmanOn = was }
}
