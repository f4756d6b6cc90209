// The host clock, as the kernel reads instants: RFC 3339 in UTC, to the
// millisecond, as every host writes it. The kernel itself reads no clock.

export const utcNow = () => new Date().toISOString();
