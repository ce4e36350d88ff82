// Code generated from the character map of slugify 1.6.9 (MIT, github.com/simov/slugify); DO NOT EDIT.

package xcode

// slugifyChar is slugify's default character map (no locale), which
// IOSConfig.XcodeUtils.sanitizedName applies through slugify. ok is false
// for a character slugify keeps as it is.
func slugifyChar(r rune) (s string, ok bool) {
	switch r {
	case 36: // $
		return "dollar", true
	case 37: // %
		return "percent", true
	case 38: // &
		return "and", true
	case 60: // <
		return "less", true
	case 62: // >
		return "greater", true
	case 124: // |
		return "or", true
	case 162: // ¢
		return "cent", true
	case 163: // £
		return "pound", true
	case 164: // ¤
		return "currency", true
	case 165: // ¥
		return "yen", true
	case 169: // ©
		return "(c)", true
	case 170: // ª
		return "a", true
	case 174: // ®
		return "(r)", true
	case 186: // º
		return "o", true
	case 192: // À
		return "A", true
	case 193: // Á
		return "A", true
	case 194: // Â
		return "A", true
	case 195: // Ã
		return "A", true
	case 196: // Ä
		return "A", true
	case 197: // Å
		return "A", true
	case 198: // Æ
		return "AE", true
	case 199: // Ç
		return "C", true
	case 200: // È
		return "E", true
	case 201: // É
		return "E", true
	case 202: // Ê
		return "E", true
	case 203: // Ë
		return "E", true
	case 204: // Ì
		return "I", true
	case 205: // Í
		return "I", true
	case 206: // Î
		return "I", true
	case 207: // Ï
		return "I", true
	case 208: // Ð
		return "D", true
	case 209: // Ñ
		return "N", true
	case 210: // Ò
		return "O", true
	case 211: // Ó
		return "O", true
	case 212: // Ô
		return "O", true
	case 213: // Õ
		return "O", true
	case 214: // Ö
		return "O", true
	case 216: // Ø
		return "O", true
	case 217: // Ù
		return "U", true
	case 218: // Ú
		return "U", true
	case 219: // Û
		return "U", true
	case 220: // Ü
		return "U", true
	case 221: // Ý
		return "Y", true
	case 222: // Þ
		return "TH", true
	case 223: // ß
		return "ss", true
	case 224: // à
		return "a", true
	case 225: // á
		return "a", true
	case 226: // â
		return "a", true
	case 227: // ã
		return "a", true
	case 228: // ä
		return "a", true
	case 229: // å
		return "a", true
	case 230: // æ
		return "ae", true
	case 231: // ç
		return "c", true
	case 232: // è
		return "e", true
	case 233: // é
		return "e", true
	case 234: // ê
		return "e", true
	case 235: // ë
		return "e", true
	case 236: // ì
		return "i", true
	case 237: // í
		return "i", true
	case 238: // î
		return "i", true
	case 239: // ï
		return "i", true
	case 240: // ð
		return "d", true
	case 241: // ñ
		return "n", true
	case 242: // ò
		return "o", true
	case 243: // ó
		return "o", true
	case 244: // ô
		return "o", true
	case 245: // õ
		return "o", true
	case 246: // ö
		return "o", true
	case 248: // ø
		return "o", true
	case 249: // ù
		return "u", true
	case 250: // ú
		return "u", true
	case 251: // û
		return "u", true
	case 252: // ü
		return "u", true
	case 253: // ý
		return "y", true
	case 254: // þ
		return "th", true
	case 255: // ÿ
		return "y", true
	case 256: // Ā
		return "A", true
	case 257: // ā
		return "a", true
	case 258: // Ă
		return "A", true
	case 259: // ă
		return "a", true
	case 260: // Ą
		return "A", true
	case 261: // ą
		return "a", true
	case 262: // Ć
		return "C", true
	case 263: // ć
		return "c", true
	case 268: // Č
		return "C", true
	case 269: // č
		return "c", true
	case 270: // Ď
		return "D", true
	case 271: // ď
		return "d", true
	case 272: // Đ
		return "DJ", true
	case 273: // đ
		return "dj", true
	case 274: // Ē
		return "E", true
	case 275: // ē
		return "e", true
	case 278: // Ė
		return "E", true
	case 279: // ė
		return "e", true
	case 280: // Ę
		return "e", true
	case 281: // ę
		return "e", true
	case 282: // Ě
		return "E", true
	case 283: // ě
		return "e", true
	case 286: // Ğ
		return "G", true
	case 287: // ğ
		return "g", true
	case 290: // Ģ
		return "G", true
	case 291: // ģ
		return "g", true
	case 296: // Ĩ
		return "I", true
	case 297: // ĩ
		return "i", true
	case 298: // Ī
		return "i", true
	case 299: // ī
		return "i", true
	case 302: // Į
		return "I", true
	case 303: // į
		return "i", true
	case 304: // İ
		return "I", true
	case 305: // ı
		return "i", true
	case 310: // Ķ
		return "k", true
	case 311: // ķ
		return "k", true
	case 315: // Ļ
		return "L", true
	case 316: // ļ
		return "l", true
	case 317: // Ľ
		return "L", true
	case 318: // ľ
		return "l", true
	case 321: // Ł
		return "L", true
	case 322: // ł
		return "l", true
	case 323: // Ń
		return "N", true
	case 324: // ń
		return "n", true
	case 325: // Ņ
		return "N", true
	case 326: // ņ
		return "n", true
	case 327: // Ň
		return "N", true
	case 328: // ň
		return "n", true
	case 332: // Ō
		return "O", true
	case 333: // ō
		return "o", true
	case 336: // Ő
		return "O", true
	case 337: // ő
		return "o", true
	case 338: // Œ
		return "OE", true
	case 339: // œ
		return "oe", true
	case 340: // Ŕ
		return "R", true
	case 341: // ŕ
		return "r", true
	case 344: // Ř
		return "R", true
	case 345: // ř
		return "r", true
	case 346: // Ś
		return "S", true
	case 347: // ś
		return "s", true
	case 350: // Ş
		return "S", true
	case 351: // ş
		return "s", true
	case 352: // Š
		return "S", true
	case 353: // š
		return "s", true
	case 354: // Ţ
		return "T", true
	case 355: // ţ
		return "t", true
	case 356: // Ť
		return "T", true
	case 357: // ť
		return "t", true
	case 360: // Ũ
		return "U", true
	case 361: // ũ
		return "u", true
	case 362: // Ū
		return "u", true
	case 363: // ū
		return "u", true
	case 366: // Ů
		return "U", true
	case 367: // ů
		return "u", true
	case 368: // Ű
		return "U", true
	case 369: // ű
		return "u", true
	case 370: // Ų
		return "U", true
	case 371: // ų
		return "u", true
	case 372: // Ŵ
		return "W", true
	case 373: // ŵ
		return "w", true
	case 374: // Ŷ
		return "Y", true
	case 375: // ŷ
		return "y", true
	case 376: // Ÿ
		return "Y", true
	case 377: // Ź
		return "Z", true
	case 378: // ź
		return "z", true
	case 379: // Ż
		return "Z", true
	case 380: // ż
		return "z", true
	case 381: // Ž
		return "Z", true
	case 382: // ž
		return "z", true
	case 399: // Ə
		return "E", true
	case 402: // ƒ
		return "f", true
	case 416: // Ơ
		return "O", true
	case 417: // ơ
		return "o", true
	case 431: // Ư
		return "U", true
	case 432: // ư
		return "u", true
	case 456: // ǈ
		return "LJ", true
	case 457: // ǉ
		return "lj", true
	case 459: // ǋ
		return "NJ", true
	case 460: // ǌ
		return "nj", true
	case 536: // Ș
		return "S", true
	case 537: // ș
		return "s", true
	case 538: // Ț
		return "T", true
	case 539: // ț
		return "t", true
	case 601: // ə
		return "e", true
	case 730: // ˚
		return "o", true
	case 902: // Ά
		return "A", true
	case 904: // Έ
		return "E", true
	case 905: // Ή
		return "H", true
	case 906: // Ί
		return "I", true
	case 908: // Ό
		return "O", true
	case 910: // Ύ
		return "Y", true
	case 911: // Ώ
		return "W", true
	case 912: // ΐ
		return "i", true
	case 913: // Α
		return "A", true
	case 914: // Β
		return "B", true
	case 915: // Γ
		return "G", true
	case 916: // Δ
		return "D", true
	case 917: // Ε
		return "E", true
	case 918: // Ζ
		return "Z", true
	case 919: // Η
		return "H", true
	case 920: // Θ
		return "8", true
	case 921: // Ι
		return "I", true
	case 922: // Κ
		return "K", true
	case 923: // Λ
		return "L", true
	case 924: // Μ
		return "M", true
	case 925: // Ν
		return "N", true
	case 926: // Ξ
		return "3", true
	case 927: // Ο
		return "O", true
	case 928: // Π
		return "P", true
	case 929: // Ρ
		return "R", true
	case 931: // Σ
		return "S", true
	case 932: // Τ
		return "T", true
	case 933: // Υ
		return "Y", true
	case 934: // Φ
		return "F", true
	case 935: // Χ
		return "X", true
	case 936: // Ψ
		return "PS", true
	case 937: // Ω
		return "W", true
	case 938: // Ϊ
		return "I", true
	case 939: // Ϋ
		return "Y", true
	case 940: // ά
		return "a", true
	case 941: // έ
		return "e", true
	case 942: // ή
		return "h", true
	case 943: // ί
		return "i", true
	case 944: // ΰ
		return "y", true
	case 945: // α
		return "a", true
	case 946: // β
		return "b", true
	case 947: // γ
		return "g", true
	case 948: // δ
		return "d", true
	case 949: // ε
		return "e", true
	case 950: // ζ
		return "z", true
	case 951: // η
		return "h", true
	case 952: // θ
		return "8", true
	case 953: // ι
		return "i", true
	case 954: // κ
		return "k", true
	case 955: // λ
		return "l", true
	case 956: // μ
		return "m", true
	case 957: // ν
		return "n", true
	case 958: // ξ
		return "3", true
	case 959: // ο
		return "o", true
	case 960: // π
		return "p", true
	case 961: // ρ
		return "r", true
	case 962: // ς
		return "s", true
	case 963: // σ
		return "s", true
	case 964: // τ
		return "t", true
	case 965: // υ
		return "y", true
	case 966: // φ
		return "f", true
	case 967: // χ
		return "x", true
	case 968: // ψ
		return "ps", true
	case 969: // ω
		return "w", true
	case 970: // ϊ
		return "i", true
	case 971: // ϋ
		return "y", true
	case 972: // ό
		return "o", true
	case 973: // ύ
		return "y", true
	case 974: // ώ
		return "w", true
	case 1025: // Ё
		return "Yo", true
	case 1026: // Ђ
		return "DJ", true
	case 1028: // Є
		return "Ye", true
	case 1030: // І
		return "I", true
	case 1031: // Ї
		return "Yi", true
	case 1032: // Ј
		return "J", true
	case 1033: // Љ
		return "LJ", true
	case 1034: // Њ
		return "NJ", true
	case 1035: // Ћ
		return "C", true
	case 1039: // Џ
		return "DZ", true
	case 1040: // А
		return "A", true
	case 1041: // Б
		return "B", true
	case 1042: // В
		return "V", true
	case 1043: // Г
		return "G", true
	case 1044: // Д
		return "D", true
	case 1045: // Е
		return "E", true
	case 1046: // Ж
		return "Zh", true
	case 1047: // З
		return "Z", true
	case 1048: // И
		return "I", true
	case 1049: // Й
		return "J", true
	case 1050: // К
		return "K", true
	case 1051: // Л
		return "L", true
	case 1052: // М
		return "M", true
	case 1053: // Н
		return "N", true
	case 1054: // О
		return "O", true
	case 1055: // П
		return "P", true
	case 1056: // Р
		return "R", true
	case 1057: // С
		return "S", true
	case 1058: // Т
		return "T", true
	case 1059: // У
		return "U", true
	case 1060: // Ф
		return "F", true
	case 1061: // Х
		return "H", true
	case 1062: // Ц
		return "C", true
	case 1063: // Ч
		return "Ch", true
	case 1064: // Ш
		return "Sh", true
	case 1065: // Щ
		return "Sh", true
	case 1066: // Ъ
		return "U", true
	case 1067: // Ы
		return "Y", true
	case 1068: // Ь
		return "", true
	case 1069: // Э
		return "E", true
	case 1070: // Ю
		return "Yu", true
	case 1071: // Я
		return "Ya", true
	case 1072: // а
		return "a", true
	case 1073: // б
		return "b", true
	case 1074: // в
		return "v", true
	case 1075: // г
		return "g", true
	case 1076: // д
		return "d", true
	case 1077: // е
		return "e", true
	case 1078: // ж
		return "zh", true
	case 1079: // з
		return "z", true
	case 1080: // и
		return "i", true
	case 1081: // й
		return "j", true
	case 1082: // к
		return "k", true
	case 1083: // л
		return "l", true
	case 1084: // м
		return "m", true
	case 1085: // н
		return "n", true
	case 1086: // о
		return "o", true
	case 1087: // п
		return "p", true
	case 1088: // р
		return "r", true
	case 1089: // с
		return "s", true
	case 1090: // т
		return "t", true
	case 1091: // у
		return "u", true
	case 1092: // ф
		return "f", true
	case 1093: // х
		return "h", true
	case 1094: // ц
		return "c", true
	case 1095: // ч
		return "ch", true
	case 1096: // ш
		return "sh", true
	case 1097: // щ
		return "sh", true
	case 1098: // ъ
		return "u", true
	case 1099: // ы
		return "y", true
	case 1100: // ь
		return "", true
	case 1101: // э
		return "e", true
	case 1102: // ю
		return "yu", true
	case 1103: // я
		return "ya", true
	case 1105: // ё
		return "yo", true
	case 1106: // ђ
		return "dj", true
	case 1108: // є
		return "ye", true
	case 1110: // і
		return "i", true
	case 1111: // ї
		return "yi", true
	case 1112: // ј
		return "j", true
	case 1113: // љ
		return "lj", true
	case 1114: // њ
		return "nj", true
	case 1115: // ћ
		return "c", true
	case 1117: // ѝ
		return "u", true
	case 1119: // џ
		return "dz", true
	case 1168: // Ґ
		return "G", true
	case 1169: // ґ
		return "g", true
	case 1170: // Ғ
		return "GH", true
	case 1171: // ғ
		return "gh", true
	case 1178: // Қ
		return "KH", true
	case 1179: // қ
		return "kh", true
	case 1186: // Ң
		return "NG", true
	case 1187: // ң
		return "ng", true
	case 1198: // Ү
		return "UE", true
	case 1199: // ү
		return "ue", true
	case 1200: // Ұ
		return "U", true
	case 1201: // ұ
		return "u", true
	case 1210: // Һ
		return "H", true
	case 1211: // һ
		return "h", true
	case 1240: // Ә
		return "AE", true
	case 1241: // ә
		return "ae", true
	case 1256: // Ө
		return "OE", true
	case 1257: // ө
		return "oe", true
	case 1329: // Ա
		return "A", true
	case 1330: // Բ
		return "B", true
	case 1331: // Գ
		return "G", true
	case 1332: // Դ
		return "D", true
	case 1333: // Ե
		return "E", true
	case 1334: // Զ
		return "Z", true
	case 1335: // Է
		return "E'", true
	case 1336: // Ը
		return "Y'", true
	case 1337: // Թ
		return "T'", true
	case 1338: // Ժ
		return "JH", true
	case 1339: // Ի
		return "I", true
	case 1340: // Լ
		return "L", true
	case 1341: // Խ
		return "X", true
	case 1342: // Ծ
		return "C'", true
	case 1343: // Կ
		return "K", true
	case 1344: // Հ
		return "H", true
	case 1345: // Ձ
		return "D'", true
	case 1346: // Ղ
		return "GH", true
	case 1347: // Ճ
		return "TW", true
	case 1348: // Մ
		return "M", true
	case 1349: // Յ
		return "Y", true
	case 1350: // Ն
		return "N", true
	case 1351: // Շ
		return "SH", true
	case 1353: // Չ
		return "CH", true
	case 1354: // Պ
		return "P", true
	case 1355: // Ջ
		return "J", true
	case 1356: // Ռ
		return "R'", true
	case 1357: // Ս
		return "S", true
	case 1358: // Վ
		return "V", true
	case 1359: // Տ
		return "T", true
	case 1360: // Ր
		return "R", true
	case 1361: // Ց
		return "C", true
	case 1363: // Փ
		return "P'", true
	case 1364: // Ք
		return "Q'", true
	case 1365: // Օ
		return "O''", true
	case 1366: // Ֆ
		return "F", true
	case 1415: // և
		return "EV", true
	case 1569: // ء
		return "a", true
	case 1570: // آ
		return "aa", true
	case 1571: // أ
		return "a", true
	case 1572: // ؤ
		return "u", true
	case 1573: // إ
		return "i", true
	case 1574: // ئ
		return "e", true
	case 1575: // ا
		return "a", true
	case 1576: // ب
		return "b", true
	case 1577: // ة
		return "h", true
	case 1578: // ت
		return "t", true
	case 1579: // ث
		return "th", true
	case 1580: // ج
		return "j", true
	case 1581: // ح
		return "h", true
	case 1582: // خ
		return "kh", true
	case 1583: // د
		return "d", true
	case 1584: // ذ
		return "th", true
	case 1585: // ر
		return "r", true
	case 1586: // ز
		return "z", true
	case 1587: // س
		return "s", true
	case 1588: // ش
		return "sh", true
	case 1589: // ص
		return "s", true
	case 1590: // ض
		return "dh", true
	case 1591: // ط
		return "t", true
	case 1592: // ظ
		return "z", true
	case 1593: // ع
		return "a", true
	case 1594: // غ
		return "gh", true
	case 1601: // ف
		return "f", true
	case 1602: // ق
		return "q", true
	case 1603: // ك
		return "k", true
	case 1604: // ل
		return "l", true
	case 1605: // م
		return "m", true
	case 1606: // ن
		return "n", true
	case 1607: // ه
		return "h", true
	case 1608: // و
		return "w", true
	case 1609: // ى
		return "a", true
	case 1610: // ي
		return "y", true
	case 1611: // ً
		return "an", true
	case 1612: // ٌ
		return "on", true
	case 1613: // ٍ
		return "en", true
	case 1614: // َ
		return "a", true
	case 1615: // ُ
		return "u", true
	case 1616: // ِ
		return "e", true
	case 1618: // ْ
		return "", true
	case 1632: // ٠
		return "0", true
	case 1633: // ١
		return "1", true
	case 1634: // ٢
		return "2", true
	case 1635: // ٣
		return "3", true
	case 1636: // ٤
		return "4", true
	case 1637: // ٥
		return "5", true
	case 1638: // ٦
		return "6", true
	case 1639: // ٧
		return "7", true
	case 1640: // ٨
		return "8", true
	case 1641: // ٩
		return "9", true
	case 1662: // پ
		return "p", true
	case 1670: // چ
		return "ch", true
	case 1688: // ژ
		return "zh", true
	case 1705: // ک
		return "k", true
	case 1711: // گ
		return "g", true
	case 1740: // ی
		return "y", true
	case 1776: // ۰
		return "0", true
	case 1777: // ۱
		return "1", true
	case 1778: // ۲
		return "2", true
	case 1779: // ۳
		return "3", true
	case 1780: // ۴
		return "4", true
	case 1781: // ۵
		return "5", true
	case 1782: // ۶
		return "6", true
	case 1783: // ۷
		return "7", true
	case 1784: // ۸
		return "8", true
	case 1785: // ۹
		return "9", true
	case 3647: // ฿
		return "baht", true
	case 4304: // ა
		return "a", true
	case 4305: // ბ
		return "b", true
	case 4306: // გ
		return "g", true
	case 4307: // დ
		return "d", true
	case 4308: // ე
		return "e", true
	case 4309: // ვ
		return "v", true
	case 4310: // ზ
		return "z", true
	case 4311: // თ
		return "t", true
	case 4312: // ი
		return "i", true
	case 4313: // კ
		return "k", true
	case 4314: // ლ
		return "l", true
	case 4315: // მ
		return "m", true
	case 4316: // ნ
		return "n", true
	case 4317: // ო
		return "o", true
	case 4318: // პ
		return "p", true
	case 4319: // ჟ
		return "zh", true
	case 4320: // რ
		return "r", true
	case 4321: // ს
		return "s", true
	case 4322: // ტ
		return "t", true
	case 4323: // უ
		return "u", true
	case 4324: // ფ
		return "f", true
	case 4325: // ქ
		return "k", true
	case 4326: // ღ
		return "gh", true
	case 4327: // ყ
		return "q", true
	case 4328: // შ
		return "sh", true
	case 4329: // ჩ
		return "ch", true
	case 4330: // ც
		return "ts", true
	case 4331: // ძ
		return "dz", true
	case 4332: // წ
		return "ts", true
	case 4333: // ჭ
		return "ch", true
	case 4334: // ხ
		return "kh", true
	case 4335: // ჯ
		return "j", true
	case 4336: // ჰ
		return "h", true
	case 7778: // Ṣ
		return "S", true
	case 7779: // ṣ
		return "s", true
	case 7808: // Ẁ
		return "W", true
	case 7809: // ẁ
		return "w", true
	case 7810: // Ẃ
		return "W", true
	case 7811: // ẃ
		return "w", true
	case 7812: // Ẅ
		return "W", true
	case 7813: // ẅ
		return "w", true
	case 7838: // ẞ
		return "SS", true
	case 7840: // Ạ
		return "A", true
	case 7841: // ạ
		return "a", true
	case 7842: // Ả
		return "A", true
	case 7843: // ả
		return "a", true
	case 7844: // Ấ
		return "A", true
	case 7845: // ấ
		return "a", true
	case 7846: // Ầ
		return "A", true
	case 7847: // ầ
		return "a", true
	case 7848: // Ẩ
		return "A", true
	case 7849: // ẩ
		return "a", true
	case 7850: // Ẫ
		return "A", true
	case 7851: // ẫ
		return "a", true
	case 7852: // Ậ
		return "A", true
	case 7853: // ậ
		return "a", true
	case 7854: // Ắ
		return "A", true
	case 7855: // ắ
		return "a", true
	case 7856: // Ằ
		return "A", true
	case 7857: // ằ
		return "a", true
	case 7858: // Ẳ
		return "A", true
	case 7859: // ẳ
		return "a", true
	case 7860: // Ẵ
		return "A", true
	case 7861: // ẵ
		return "a", true
	case 7862: // Ặ
		return "A", true
	case 7863: // ặ
		return "a", true
	case 7864: // Ẹ
		return "E", true
	case 7865: // ẹ
		return "e", true
	case 7866: // Ẻ
		return "E", true
	case 7867: // ẻ
		return "e", true
	case 7868: // Ẽ
		return "E", true
	case 7869: // ẽ
		return "e", true
	case 7870: // Ế
		return "E", true
	case 7871: // ế
		return "e", true
	case 7872: // Ề
		return "E", true
	case 7873: // ề
		return "e", true
	case 7874: // Ể
		return "E", true
	case 7875: // ể
		return "e", true
	case 7876: // Ễ
		return "E", true
	case 7877: // ễ
		return "e", true
	case 7878: // Ệ
		return "E", true
	case 7879: // ệ
		return "e", true
	case 7880: // Ỉ
		return "I", true
	case 7881: // ỉ
		return "i", true
	case 7882: // Ị
		return "I", true
	case 7883: // ị
		return "i", true
	case 7884: // Ọ
		return "O", true
	case 7885: // ọ
		return "o", true
	case 7886: // Ỏ
		return "O", true
	case 7887: // ỏ
		return "o", true
	case 7888: // Ố
		return "O", true
	case 7889: // ố
		return "o", true
	case 7890: // Ồ
		return "O", true
	case 7891: // ồ
		return "o", true
	case 7892: // Ổ
		return "O", true
	case 7893: // ổ
		return "o", true
	case 7894: // Ỗ
		return "O", true
	case 7895: // ỗ
		return "o", true
	case 7896: // Ộ
		return "O", true
	case 7897: // ộ
		return "o", true
	case 7898: // Ớ
		return "O", true
	case 7899: // ớ
		return "o", true
	case 7900: // Ờ
		return "O", true
	case 7901: // ờ
		return "o", true
	case 7902: // Ở
		return "O", true
	case 7903: // ở
		return "o", true
	case 7904: // Ỡ
		return "O", true
	case 7905: // ỡ
		return "o", true
	case 7906: // Ợ
		return "O", true
	case 7907: // ợ
		return "o", true
	case 7908: // Ụ
		return "U", true
	case 7909: // ụ
		return "u", true
	case 7910: // Ủ
		return "U", true
	case 7911: // ủ
		return "u", true
	case 7912: // Ứ
		return "U", true
	case 7913: // ứ
		return "u", true
	case 7914: // Ừ
		return "U", true
	case 7915: // ừ
		return "u", true
	case 7916: // Ử
		return "U", true
	case 7917: // ử
		return "u", true
	case 7918: // Ữ
		return "U", true
	case 7919: // ữ
		return "u", true
	case 7920: // Ự
		return "U", true
	case 7921: // ự
		return "u", true
	case 7922: // Ỳ
		return "Y", true
	case 7923: // ỳ
		return "y", true
	case 7924: // Ỵ
		return "Y", true
	case 7925: // ỵ
		return "y", true
	case 7926: // Ỷ
		return "Y", true
	case 7927: // ỷ
		return "y", true
	case 7928: // Ỹ
		return "Y", true
	case 7929: // ỹ
		return "y", true
	case 8211: // –
		return "-", true
	case 8216: // ‘
		return "'", true
	case 8217: // ’
		return "'", true
	case 8220: // “
		return "\"", true
	case 8221: // ”
		return "\"", true
	case 8222: // „
		return "\"", true
	case 8224: // †
		return "+", true
	case 8226: // •
		return "*", true
	case 8230: // …
		return "...", true
	case 8352: // ₠
		return "ecu", true
	case 8354: // ₢
		return "cruzeiro", true
	case 8355: // ₣
		return "french franc", true
	case 8356: // ₤
		return "lira", true
	case 8357: // ₥
		return "mill", true
	case 8358: // ₦
		return "naira", true
	case 8359: // ₧
		return "peseta", true
	case 8360: // ₨
		return "rupee", true
	case 8361: // ₩
		return "won", true
	case 8362: // ₪
		return "new shequel", true
	case 8363: // ₫
		return "dong", true
	case 8364: // €
		return "euro", true
	case 8365: // ₭
		return "kip", true
	case 8366: // ₮
		return "tugrik", true
	case 8367: // ₯
		return "drachma", true
	case 8368: // ₰
		return "penny", true
	case 8369: // ₱
		return "peso", true
	case 8370: // ₲
		return "guarani", true
	case 8371: // ₳
		return "austral", true
	case 8372: // ₴
		return "hryvnia", true
	case 8373: // ₵
		return "cedi", true
	case 8376: // ₸
		return "kazakhstani tenge", true
	case 8377: // ₹
		return "indian rupee", true
	case 8378: // ₺
		return "turkish lira", true
	case 8381: // ₽
		return "russian ruble", true
	case 8383: // ₿
		return "bitcoin", true
	case 8480: // ℠
		return "sm", true
	case 8482: // ™
		return "tm", true
	case 8706: // ∂
		return "d", true
	case 8710: // ∆
		return "delta", true
	case 8721: // ∑
		return "sum", true
	case 8734: // ∞
		return "infinity", true
	case 9829: // ♥
		return "love", true
	case 20803: // 元
		return "yuan", true
	case 20870: // 円
		return "yen", true
	case 65020: // ﷼
		return "rial", true
	case 65269: // ﻵ
		return "laa", true
	case 65271: // ﻷ
		return "laa", true
	case 65273: // ﻹ
		return "lai", true
	case 65275: // ﻻ
		return "la", true
	}
	return "", false
}
