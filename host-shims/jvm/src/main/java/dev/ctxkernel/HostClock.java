package dev.ctxkernel;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * The host clock, as the kernel reads instants: RFC 3339 in UTC, to the
 * millisecond, as every host writes it. The kernel itself reads no clock.
 */
public final class HostClock {
    private static final DateTimeFormatter FORMAT = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

    private HostClock() {}

    /** The current instant. */
    public static String now() {
        return FORMAT.format(Instant.now());
    }
}
