#include "number.h"

#include <math.h>

#define MAX_FRAC 20 /* libxml2 reads at most this many significant fraction digits */

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int digit(char c)
{
    return c >= '0' && c <= '9';
}

double xpath_number(const char *s, size_t n)
{
    const char *p = s, *end = s + n;
    while (p < end && blank(*p))
        p++;
    while (end > p && blank(end[-1]))
        end--;
    int negative = p < end && *p == '-';
    if (negative)
        p++;
    double ret = 0.0;
    int whole = 0, frac = 0;
    for (; p < end && digit(*p); p++, whole++)
        ret = ret * 10 + (*p - '0');
    if (p < end && *p == '.') {
        p++;
        int zeros = 0, used = 0;
        double fraction = 0.0;
        for (; p < end && *p == '0'; p++, frac++)
            zeros++;
        for (; p < end && digit(*p); p++, frac++)
            if (used < MAX_FRAC) {
                fraction = fraction * 10 + (*p - '0');
                used++;
            }
        if (frac)
            ret += fraction / pow(10.0, zeros + used);
    }
    if (!whole && !frac)
        return NAN; /* '', '-', '.', '-.' and the like */
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        long e = 0;
        for (; p < end && digit(*p); p++)
            if (e < 1000000)
                e = e * 10 + (*p - '0');
        if (e > 1000000)
            e = 1000000;
        ret *= pow(10.0, eneg ? -e : e);
    }
    if (p != end)
        return NAN;
    return negative ? -ret : ret;
}
