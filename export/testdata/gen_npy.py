# Writes the .npy golden files of npy_test.go with numpy.save (numpy 1.24.2, Debian 12):
#   /usr/bin/python3 gen_npy.py
import numpy as np

np.save("f4_2x3.npy", np.array([[0, 1.5, -2], [3.25e-8, 65504, -0.0]], dtype="<f4"))
np.save("f4_5.npy", np.array([1, 2, 3, 4, 5], dtype="<f4"))
np.save("f4_0x4.npy", np.zeros((0, 4), dtype="<f4"))
np.save("f4_scalar.npy", np.array(7.5, dtype="<f4"))
np.save("i8_2x4.npy", np.array([[101, 2023, 102, 0], [-1, 1 << 40, 3, 4]], dtype="<i8"))
