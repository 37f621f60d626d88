/* ldr_gcs: the Google Cloud Storage backend of ldr_objstore (the JSON API:
 * objects.list with pages, objects.get ?alt=media with byte ranges).
 *
 * Endpoint: STORAGE_EMULATOR_HOST when set (as Google's client libraries
 * read it; a bare host:port means http), else https://storage.googleapis.com.
 *
 * Credentials, as Google's libraries find them: GOOGLE_APPLICATION_CREDENTIALS
 * naming a JSON key file, of type "service_account" (a JWT asserting the
 * account, with scope devstorage.read_only, signed RS256 with its private key
 * by ldr_rsa, is traded at its token_uri for an access token) or
 * "authorized_user" (its refresh token is traded likewise); else the metadata
 * server (GCE_METADATA_HOST, else metadata.google.internal), asked for the
 * default service account's token (with STORAGE_EMULATOR_HOST set, only when
 * GCE_METADATA_HOST is set too); else no token (anonymous: public buckets). Tokens are kept until 5 minutes
 * before they expire, then fetched again; a metadata server that does not
 * answer is asked again after 5 minutes. A key file that cannot be used fails
 * every request with UNAUTHENTICATED (or UNIMPLEMENTED for other types),
 * naming the file.
 *
 * Thread-safe (the token cache has its own mutex). Tokens never appear in
 * logs or errors. */
#ifndef LDR_GCS_H
#define LDR_GCS_H

#include "ldr_objstore.h"

extern const ldr_os_backend ldr_gcs_backend;

#endif
