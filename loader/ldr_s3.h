/* ldr_s3: the S3 backend of ldr_objstore (AWS S3 and S3-compatible stores
 * such as MinIO, Ceph and R2), requests signed with AWS Signature V4.
 *
 * Endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else S3_ENDPOINT (TF's
 * name; a bare host[:port] takes its scheme from S3_USE_HTTPS, default 1),
 * all with path-style addressing (endpoint/bucket/key); without any,
 * https://bucket.s3.REGION.amazonaws.com (virtual-hosted; path-style for
 * bucket names with dots). Region: AWS_REGION, AWS_DEFAULT_REGION, else
 * us-east-1. S3_VERIFY_SSL=0 turns off TLS verification.
 *
 * Credentials, the first that gives a key, as the AWS SDKs look: the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN);
 * the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) at profile AWS_PROFILE (else "default"); the container
 * endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI on 169.254.170.2, or
 * AWS_CONTAINER_CREDENTIALS_FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN
 * or _TOKEN_FILE); the instance metadata service (IMDSv2, unless
 * AWS_EC2_METADATA_DISABLED=true; AWS_EC2_METADATA_SERVICE_ENDPOINT moves
 * it). Keys from an endpoint are kept until 5 minutes before they expire; a
 * metadata service that does not answer is asked again after 5 minutes.
 * With no key at all requests go unsigned (public buckets).
 *
 * Thread-safe (the credential cache has its own mutex). Keys and tokens
 * never appear in logs or errors. */
#ifndef LDR_S3_H
#define LDR_S3_H

#include <stdint.h>

#include "ldr_objstore.h"

extern const ldr_os_backend ldr_s3_backend;

typedef struct ldr_s3_key {
  char id[256];
  char secret[256];
  char token[4096]; /* "" when none */
} ldr_s3_key;

/* Signs one request: fills the "Authorization", "x-amz-date",
 * "x-amz-content-sha256" and "x-amz-security-token" header lines (host is
 * the Host header's value, canonical_uri already percent-encoded,
 * canonical_query sorted and encoded). amz_date: "YYYYMMDDTHHMMSSZ".
 * Returns the number of header lines written into hdr (each malloced). */
int ldr_s3_sign(const ldr_s3_key *k, const char *region, const char *method, const char *host,
                const char *canonical_uri, const char *canonical_query, const char *amz_date,
                char **hdr);

#endif
