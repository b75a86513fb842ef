// libsndfile (Debian's libsndfile1-dev): the WAV files of 'plugind audio apply'.
#include <sndfile.h>
