/* ldr_gcs: the Google Cloud Storage backend of ldr_objstore (the JSON API:
 * objects.list with pages, objects.get ?alt=media with byte ranges).
 *
 * Endpoint: STORAGE_EMULATOR_HOST when set (as Google's client libraries
 * read it; a bare host:port means http), else https://storage.googleapis.com.
 *
 * Credentials, as Google's libraries find them: GOOGLE_APPLICATION_CREDENTIALS
 * naming a JSON file of type "authorized_user" (its refresh token is traded
 * at its token_uri for an access token); else the metadata server
 * (GCE_METADATA_HOST, else metadata.google.internal), asked for the default
 * service account's token, except when STORAGE_EMULATOR_HOST is set; else no
 * token (anonymous: public buckets). Tokens are kept until 5 minutes before
 * they expire; a metadata server that does not answer is asked again after
 * 5 minutes. A "service_account" key file needs an RS256-signed JWT, which is
 * not implemented: such a file gives UNIMPLEMENTED, saying so.
 *
 * Thread-safe (the token cache has its own mutex). Tokens never appear in
 * logs or errors. */
#ifndef LDR_GCS_H
#define LDR_GCS_H

#include "ldr_objstore.h"

extern const ldr_os_backend ldr_gcs_backend;

#endif
