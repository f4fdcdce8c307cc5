/*
 * timeutil.c - clocks and RFC 3339.
 */
#include "timeutil.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t
time_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
time_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
time_format(int64_t us, char *buf, size_t len, int with_ms)
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	if (with_ms)
		snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		    (int)((us / 1000) % 1000));
	else
		snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
		    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void
time_format_rfc3339_ms(int64_t us, char *buf, size_t len)
{
	time_format(us, buf, len, 1);
}

void
time_format_rfc3339(int64_t us, char *buf, size_t len)
{
	time_format(us, buf, len, 0);
}

static int
digits(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int64_t
days_from_civil(int y, int m, int d)
{
	/* proleptic Gregorian day count, 1970-01-01 = 0 */
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe - 719468;
}

int
time_parse_rfc3339(const char *s, int64_t *out_us)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0;
	int64_t frac = 0, us;
	const char *p;
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (strlen(s) < 20)
		return -1;
	if (digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
	    digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) ||
	    s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &sec))
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60)
		return -1;
	if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return -1;
	p = s + 19;
	if (*p == '.') {
		int n = 0;

		p++;
		while (isdigit((unsigned char)*p)) {
			if (n < 6) {
				frac = frac * 10 + (*p - '0');
				n++;
			}
			p++;
		}
		if (n == 0)
			return -1;
		while (n++ < 6)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1;

		if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 ||
		    om > 59)
			return -1;
		oh *= sign;
		om *= sign;
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	us = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - oh * 3600 - om * 60) *
		1000000 +
	    frac;
	*out_us = us;
	return 0;
}

bool
time_period_valid(const char *s)
{
	int year = 0;

	if (s == NULL || strlen(s) != 7 || s[4] != '-')
		return false;
	for (int i = 0; i < 7; i++)
		if (i != 4 && (s[i] < '0' || s[i] > '9'))
			return false;
	for (int i = 0; i < 4; i++)
		year = year * 10 + (s[i] - '0');
	if (year < 1970)
		return false;
	return (s[5] == '0' && s[6] >= '1' && s[6] <= '9') ||
	    (s[5] == '1' && s[6] >= '0' && s[6] <= '2');
}

int64_t
time_backoff(int64_t first, int doublings, int64_t max, uint32_t random)
{
	int64_t d = first > 0 ? first : 1;

	for (int i = 0; i < doublings && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	return d / 2 + (int64_t)(random % (uint64_t)(d / 2 + 1));
}
