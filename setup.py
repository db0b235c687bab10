"""Maps the top-level folders into the one `paperworks` import namespace.

pyproject.toml's package-dir says where each root lives; this file lists the
packages under each root so a new subpackage needs no edit here.
"""

from setuptools import find_packages, setup

ROOTS = {
    "paperworks": "protos/paperworks",
    "paperworks.shared": "shared",
    "paperworks.kernels": "kernels",
    "paperworks.services": "services",
}

packages = []
for name, folder in ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

DATA_FILES = ["*.proto", "*.pyi", "*.ini", "*.mako", "*.cpp", "*.cu", "*.h", "*.json",
              "templates/*.html", "static/*.css", "static/*.js", "static/*.svg"]

setup(packages=packages, package_data={"": DATA_FILES})
