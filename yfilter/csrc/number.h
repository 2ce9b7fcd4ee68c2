/* XPath number(string), bit for bit as libxml2 (and yfilter.values.number) computes it. */
#ifndef ONYX_NUMBER_H
#define ONYX_NUMBER_H

#include <stddef.h>

double xpath_number(const char *s, size_t n);

#endif
