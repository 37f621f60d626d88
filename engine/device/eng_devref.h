/* eng_devref: the reference device, eng_devapi in plain C on host memory
 * (see eng_devapi.h). The executor runs against it on machines without a
 * GPU: the backend-consistency tests, and `--device=reference`. */
#ifndef ENG_DEVREF_H
#define ENG_DEVREF_H

#include "eng_devapi.h"

const eng_devapi *eng_devref_api(void);
/* Primitive calls made on all its streams so far (tests check that work
 * really went to the device). */
long eng_devref_calls(void);

#endif
