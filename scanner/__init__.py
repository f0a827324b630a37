"""cuda4amd: will this CUDA software run on an AMD GPU through ZLUDA?"""
__version__ = "0.1.0"
