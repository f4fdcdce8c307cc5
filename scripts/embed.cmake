# Turn IN into a C source defining SYM (NUL-terminated) and SYM_len.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR n "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} */\n#include <stddef.h>\nconst char ${SYM}[] = {\n${body}0x00};\nconst size_t ${SYM}_len = ${n};\n")
